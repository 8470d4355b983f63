"""CDK stacks, one module per concern: network -> cluster (nodegroups, add-ons) -> serving."""

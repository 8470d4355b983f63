"""Operations commands for a stage: `python -m ops preflight|verify --stage NAME`.

They share the stage config loader with the CDK app, talk to AWS with boto3 (read-only) and to the
cluster through the Kubernetes API, and print a table of checks (or JSON with --json). Exit code 0
only when every hard check passes; 1 when one fails; 2 for a bad stage file or bad arguments.
"""

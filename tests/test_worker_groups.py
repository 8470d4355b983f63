"""How the suite is spread over pytest-xdist's workers (tests/conftest.py)."""


def test_a_tests_worker_group_is_its_file(request):
    # One group per file: a module fixture is built once, on the one worker that runs the file.
    (marker,) = [m for m in request.node.iter_markers("xdist_group")]
    assert marker.args == ("tests/test_worker_groups.py",)

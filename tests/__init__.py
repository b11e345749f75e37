"""The test suite, a package so that its modules import each other by name
(``tests.support.brokers``) from the project root, which is on ``sys.path`` under pytest
(rootdir, prepend import mode) and in the venv (the editable install's path entry)."""

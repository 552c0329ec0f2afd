"""What the tests share that is not a test: the architecture page's module
trees, the annotation checks, the suite's worker count, the plugin tests'
deadlines, the script of the multi-process tests and where a warning
points."""

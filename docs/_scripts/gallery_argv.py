"""Command-line arguments sphinx-gallery passes to each example."""


def quick_argv(gallery_conf, script_vars) -> list[str]:
    """Every example accepts ``--quick``: short runs keep the build in budget."""
    return ["--quick"]

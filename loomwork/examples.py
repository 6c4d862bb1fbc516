"""`warp.examples`: where example assets would be (loomwork's examples are the programs in loomwork.apps)."""

from pathlib import Path


def get_asset_directory() -> str:
    """The folder example assets are read from (loomwork ships none yet)."""
    return str(Path(__file__).resolve().parent / "assets")

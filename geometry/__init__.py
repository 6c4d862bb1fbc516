"""loomwork.geometry (see the README's architecture section)."""

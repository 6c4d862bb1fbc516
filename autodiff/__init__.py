"""loomwork.autodiff (see the README's architecture section)."""

"""loomwork.render (Warp's `warp.render`): renderers with one drawing API (`begin_frame`, `render_*`,
`end_frame`, `save`). `UsdRenderer` records a USD stage (usd-core), `ImageRenderer` ray-casts PNG frames
without a display (pillow), `OpenGLRenderer` shows those frames in a window where a display exists.
`ViewerUSD` and `ViewerImage` draw loomwork.sim states with Newton's viewer API."""

from .image import ImageRenderer
from .opengl import OpenGLRenderer
from .usd import UsdRenderer
from .viewer import ViewerImage, ViewerUSD

__all__ = ["ImageRenderer", "OpenGLRenderer", "UsdRenderer", "ViewerImage", "ViewerUSD"]

"""loomwork.sim: differentiable simulation of particles, cloth and rigid bodies on the kernel layer,
following Newton 1.8's public API (``import loomwork.sim as newton``)."""

from . import solvers
from .articulation import eval_fk, eval_ik
from .builder import ModelBuilder
from .builder.bodies import MAXVAL
from .collide import CollisionPipeline
from .contacts import Contacts
from .enums import Axis, GeoType, JointTargetMode, JointType, ParticleFlags, ShapeFlags
from .geometry import Heightfield, Mesh
from .model import Control, Model, State

__all__ = ["MAXVAL", "Axis", "CollisionPipeline", "Contacts", "Control", "GeoType", "Heightfield", "JointTargetMode",
           "JointType", "Mesh", "Model", "ModelBuilder", "ParticleFlags", "ShapeFlags", "State", "eval_fk", "eval_ik",
           "solvers"]

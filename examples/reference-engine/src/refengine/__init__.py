"""refengine: an example user's speculative-decoding engine around the upstream DFlash reference model."""

from refengine.engine import Generation, SpecEngine

__all__ = ["Generation", "SpecEngine"]

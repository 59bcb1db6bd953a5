"""lookupspec: speculative decoding with an n-gram lookup drafter in front of a tiny attention model."""

from lookupspec.drafter import NGramDrafter
from lookupspec.engine import Generation, LookupEngine, plain_generate, score
from lookupspec.model import KVCache, TinyLM

__all__ = ["Generation", "KVCache", "LookupEngine", "NGramDrafter", "TinyLM", "plain_generate", "score"]

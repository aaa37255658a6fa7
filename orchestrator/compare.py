"""``coopsim compare`` as imported by name: the comparison lives in the batch runner (``orchestrator.batch``)."""

from .batch.compare import FIDELITIES, compare, variant_overrides, with_channel, with_fidelity, with_variant

__all__ = ["FIDELITIES", "compare", "variant_overrides", "with_channel", "with_fidelity", "with_variant"]

"""Pure helpers of the core: nesting bounds, lone surrogates, JSON values,
error locations, bounded id memories, digests, package faces.
"""

__all__: tuple[str, ...] = ()

"""LatticeFlow AI GO!'s ``function_call_coverage`` grader (seed 004) and the
size-bounded Jinja sandbox its ``function_calls`` template renders in.
"""

__all__: tuple[str, ...] = ()

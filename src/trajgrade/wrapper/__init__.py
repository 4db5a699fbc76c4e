"""``trajgrade run -- AGENT``: start an agent, grade its live output, stop it
on a fail; its process group and its output.
"""

__all__: tuple[str, ...] = ()

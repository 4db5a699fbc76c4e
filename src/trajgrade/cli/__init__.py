"""The ``trajgrade`` command line: every command and every click option group.

Nothing outside this package imports click.
"""

__all__: tuple[str, ...] = ()

"""What every long-running command shares: signals, memory settings, exit
status, the status line, metrics, the HTTP edge, on-fail actions, logging and
the reporting of bad input.
"""

__all__: tuple[str, ...] = ()

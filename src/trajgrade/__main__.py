"""``python -m trajgrade``."""

from __future__ import annotations

from trajgrade.cli import main

if __name__ == "__main__":
    main(prog_name="trajgrade")

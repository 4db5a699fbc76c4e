"""``python -m trajgrade`` (the hook path skips click, as the console script does)."""

from __future__ import annotations

from trajgrade._entry import main

if __name__ == "__main__":
    main()

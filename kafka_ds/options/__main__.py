"""``python -m kafka_ds.options [--write-readme [PATH]]`` (:func:`.readme.main`)."""
from .readme import main

if __name__ == "__main__":
    raise SystemExit(main())

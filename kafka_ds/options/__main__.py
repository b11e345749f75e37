"""``python -m kafka_ds.options`` prints the option tables (:func:`.tables.main`)."""

from .tables import main

if __name__ == "__main__":
    raise SystemExit(main())

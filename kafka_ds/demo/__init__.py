"""The demo: ``python -m kafka_ds.demo`` runs the main job (``job.py``), a real round trip
through a Kafka-compatible broker; ``broker.py`` starts a throw-away local Tansu broker
for it, for notebooks and for experiments. Nothing here is needed to use the connector."""

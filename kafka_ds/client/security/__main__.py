"""``python -m kafka_ds.client.security`` prints the README's security option table."""
from .settings import security_options_markdown

print(security_options_markdown())

"""TLS and SASL: ``settings`` (``SecuritySettings``, the validated settings a client carries to
the executors, secrets hidden from ``repr``), ``parse`` (the ``kafka.*`` options into them,
on the driver at plan time), ``jaas`` (the ``kafka.sasl.jaas.config`` entry), ``tls`` (key
stores, ``ssl.SSLContext``), ``sasl`` (PLAIN, SCRAM, ``make_mechanism``) and ``oauth``
(OAUTHBEARER tokens)."""

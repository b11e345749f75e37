"""Tests against servers the suite starts -- the mock cluster, Tansu, the fake broker, the
fault and secure proxies, the fake schema registry -- with no Spark session."""

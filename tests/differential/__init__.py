"""Differential tests: the same raw Kafka-protocol sessions sent to Apache Kafka and Tidelog."""

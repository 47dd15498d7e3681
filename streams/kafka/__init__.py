"""Talking to Kafka: connection security, topic administration, client helpers and the client-side remedies
for the embedded broker's and Faust's quirks (safe on real Kafka)."""

"""Unleash's delta API and streaming: what each change did to the client API (`log`), the events and
documents a client token may read (`events`), and each process's fan-out of new events to its open
streams (`feed`)."""

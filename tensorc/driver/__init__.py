"""The driver: takes every planned unit (einsum calls, ``.tc`` programs, lazy array programs,
block programs) to the session's executor and records what ran."""

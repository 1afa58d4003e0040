"""All agents. Importing this package registers every agent module listed here."""

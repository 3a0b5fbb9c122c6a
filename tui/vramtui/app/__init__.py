"""The Textual app. Only this package imports Textual; it imports the domain, never the reverse."""

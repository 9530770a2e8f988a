"""Sample domains (the only place domain words live)."""

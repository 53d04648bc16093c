"""Pure domain logic: no I/O, no web, database or network imports."""

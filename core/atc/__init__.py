"""ATC's driver: options -> settings -> compile -> write (`ge atc`, `api.atc`)."""

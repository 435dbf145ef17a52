"""Order enrichment: orders joined with a customers table kept current from Debezium change events."""

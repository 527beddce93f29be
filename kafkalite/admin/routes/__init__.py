"""The admin API's route handlers, one module per resource. Each module's class declares its
routes with `@route` (routing.py); app.AdminApi joins them, in the order of the route table."""

"""The controller's handlers over ``CompactRow`` values: the driver path's twins of
``controller.handlers``, for events whose rows are few (see ``controller.commit.driver_table``)."""

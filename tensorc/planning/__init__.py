"""Planning: plans and their cache, whole-program layouts, the checked plan options."""

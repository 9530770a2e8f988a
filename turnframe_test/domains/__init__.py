"""The sample domain's old home: the modules here are `turnframe_test.sample`'s under their
old names."""

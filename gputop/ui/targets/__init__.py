"""What a view follows, worked out from the snapshot, the cursor and the focus: ``training`` (the training process
the training panel shows) and ``job`` (the job the job view opens, and its findings). Pure: no Textual."""

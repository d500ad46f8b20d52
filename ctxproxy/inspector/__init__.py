"""The session inspector at ``/admin/ui/``: server-rendered pages over what the Store keeps of a
tenant's traffic and sessions, for a person with the admin key (``routes`` lists the pages,
``auth`` how the key is shown). Also the queries the admin API answers from (``queries``)."""

"""The folder Ansible loads journal's callback plugin from (``journal.py``)."""

"""People on the flag server: passwords, the permission model, who a request acts as, and the one check.

passwords.py    argon2id hashing, the strength rule, verification in constant time
permissions.py  permission names and built-in roles as data; the permission each admin route needs
access.py       the caller (API token, personal access token, session) and `allowed(...)`
"""

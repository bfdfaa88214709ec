"""The advice of a report: the fix for each kind of cut, on the user's own code where it can."""

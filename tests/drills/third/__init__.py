"""The third held-out set of drill mistakes (issue 24), written blind."""

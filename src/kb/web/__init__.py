"""`kb serve`: a local web page to search, read and ask the notes. Read-only.

`app` routes requests to the search service, the status report and the note reader (the
same ones every face calls); `forms` reads a request's query string, `cards` turns what they
return into what a page shows, `guard` decides who may ask at all, and `server` runs it
all in a thread of `kb serve` or `kb daemon --serve`.
"""

package main

// stockSteps upload, validate, list, download and cancel stock feeds.
func stockSteps() []step {
	upload := ok("uploadStockFile", "a feed", 200, authKey, "/stock/<client>/walk-feed.csv", feedCSV).withType("text/csv").saving("upload", "upload_id")
	get := ok("getUpload", "the processed upload", 200, authKey, "/stock/<client>/uploads/<upload>", "")
	get.before = waitProcessed("upload")
	cancel := ok("cancelUpload", "an upload still waiting", 200, authKey, "/stock/<client>/uploads/<waiting>", "")
	cancel.before = makeWaitingUpload
	// Processing began before the cancel came: a 409, as the spec says;
	// the walk makes another waiting upload and tries again.
	cancel.again = func(a *answer) bool { return a.status == 409 }
	return []step{
		upload,
		ok("uploadStockFile", "a feed sent as application/octet-stream", 200, authKey, "/stock/<client>/walk-feed-2.csv", feedCSV).withType("application/octet-stream"),
		bad("uploadStockFile", "a name not ending in .csv", 400, authKey, "/stock/<client>/walk-feed.txt", feedCSV).withType("text/csv"),
		bad("uploadStockFile", "a Content-Type that is no CSV", 415, authKey, "/stock/<client>/walk-feed.csv", "<stock/>").withType("application/xml"),
		bad("uploadStockFile", "an unknown Content-Encoding", 415, authKey, "/stock/<client>/walk-feed.csv", feedCSV).withType("text/csv").withHeader("Content-Encoding", "br"),
		bad("uploadStockFile", "gzip declared, plain CSV sent", 400, authKey, "/stock/<client>/walk-feed.csv", feedCSV).withType("text/csv").withHeader("Content-Encoding", "gzip"),
		ok("validateStockFile", "a feed", 200, authKey, "/stock/<client>/validate", feedCSV).withType("text/csv"),
		bad("validateStockFile", "a Content-Type that is no CSV", 415, authKey, "/stock/<client>/validate", "<stock/>").withType("application/xml"),
		get,
		bad("getUpload", "an unknown upload", 404, authKey, "/stock/<client>/uploads/"+unknownID, ""),
		ok("listUploads", "the client's uploads", 200, authKey, "/stock/<client>/uploads", ""),
		ok("listUploads", "applied ones with errors since a time", 200, authKey, "/stock/<client>/uploads?status=applied&has_errors=true&since=2026-01-01T00:00:00Z&limit=5", ""),
		bad("listUploads", "a status that is none", 400, authKey, "/stock/<client>/uploads?status=lost", ""),
		bad("listUploads", "a since that is no time", 400, authKey, "/stock/<client>/uploads?since=yesterday", ""),
		bad("listUploads", "a before that is no upload of the client", 400, authKey, "/stock/<client>/uploads?before="+unknownID, ""),
		ok("getUploadFile", "the file as sent", 200, authKey, "/stock/<client>/uploads/<upload>/file", ""),
		bad("getUploadFile", "an unknown upload", 404, authKey, "/stock/<client>/uploads/"+unknownID+"/file", ""),
		ok("getUploadErrorFile", "the rows it dropped", 200, authKey, "/stock/<client>/uploads/<upload>/errors.csv", ""),
		bad("getUploadErrorFile", "an unknown upload", 404, authKey, "/stock/<client>/uploads/"+unknownID+"/errors.csv", ""),
		bad("cancelUpload", "an applied upload", 409, authKey, "/stock/<client>/uploads/<upload>", ""),
		bad("cancelUpload", "an unknown upload", 404, authKey, "/stock/<client>/uploads/"+unknownID, ""),
		cancel,
		ok("cancelUpload", "the cancelled upload again", 200, authKey, "/stock/<client>/uploads/<waiting>", ""),
		bad("getUploadErrorFile", "a cancelled upload", 409, authKey, "/stock/<client>/uploads/<waiting>/errors.csv", ""),
		ok("listStock", "the client's stock", 200, authKey, "/stock/<client>/stock", ""),
		ok("listStock", "one store's, a page of 1", 200, authKey, "/stock/<client>/stock?store=S1&ean=4006381333931&limit=1", ""),
		bad("listStock", "a limit out of range", 400, authKey, "/stock/<client>/stock?limit=0", ""),
		bad("listStock", "a cursor this call did not give out", 400, authKey, "/stock/<client>/stock?after=nonsense", ""),
	}
}

# sandlot's R kernel: runs cells of code in one R process, so variables, functions and
# attached packages persist from one run to the next.
#
# The agent sends each cell on the descriptor in SANDLOT_CELL_FD, framed as
# `sandlot-cell CODE STDIN ENV CWD` plus that many bytes of each; the kernel answers
# `ready` once, then each cell's exit status, on the descriptor in SANDLOT_DONE_FD.
# Each visible top-level value is printed, as at R's prompt. SIGINT interrupts the
# running cell, never the kernel.
local({
  cells <- fifo(sprintf("/proc/self/fd/%s", Sys.getenv("SANDLOT_CELL_FD")), "rb", blocking = TRUE)
  done <- fifo(sprintf("/proc/self/fd/%s", Sys.getenv("SANDLOT_DONE_FD")), "wb", blocking = TRUE)
  Sys.unsetenv(c("SANDLOT_CELL_FD", "SANDLOT_DONE_FD"))
  report <- function(text) {
    writeBin(charToRaw(paste0(text, "\n")), done)
    flush(done)
  }

  # Packages installed later land in R_LIBS_USER, which R only searches if it existed
  # when R started.
  user <- Sys.getenv("R_LIBS_USER")
  if (nzchar(user)) {
    dir.create(user, recursive = TRUE, showWarnings = FALSE)
    .libPaths(c(user, .libPaths()))
  }

  # A cell's `quit()` ends the cell; the kernel itself leaves through `leave`.
  leave <- function(status) base::quit(save = "no", status = status)
  kernel <- new.env()
  kernel$quit <- kernel$q <- function(save = "default", status = 0, runLast = TRUE) {
    stop(structure(class = c("sandlotExit", "condition"),
                   list(message = "quit", call = NULL, status = status)))
  }
  attach(kernel, name = "sandlot:kernel", warn.conflicts = FALSE)

  # A read that a late interrupt (one meant for the cell that just ended) cuts short is
  # tried again: between cells an interrupt has nothing to stop.
  read_raw <- function(n) {
    repeat {
      got <- tryCatch(readBin(cells, "raw", n), interrupt = function(i) NULL)
      if (!is.null(got)) return(got)
    }
  }
  read_exact <- function(n) {
    data <- raw(0)
    while (length(data) < n) {
      chunk <- read_raw(n - length(data))
      if (length(chunk) == 0) leave(0)
      data <- c(data, chunk)
    }
    data
  }
  read_header <- function() {
    header <- raw(0)
    repeat {
      byte <- read_raw(1)
      if (length(byte) == 0) leave(0)
      if (byte == as.raw(10)) break
      header <- c(header, byte)
    }
    fields <- strsplit(rawToChar(header), " ", fixed = TRUE)[[1]]
    if (length(fields) != 5 || fields[1] != "sandlot-cell") {
      message("sandlot kernel: malformed cell header ", rawToChar(header))
      leave(2)
    }
    as.numeric(fields[2:5])
  }

  apply_env <- function(env) {
    saved <- list()
    if (length(env) == 0) return(saved)
    ends <- which(env == as.raw(0))
    start <- 1
    for (end in ends) {
      item <- if (end > start) rawToChar(env[start:(end - 1)]) else ""
      start <- end + 1
      at <- regexpr("=", item, fixed = TRUE)
      if (at > 1) {
        key <- substr(item, 1, at - 1)
        # The first value is the one to restore, whatever the run repeats.
        if (!(key %in% names(saved))) saved[[key]] <- Sys.getenv(key, unset = NA)
        do.call(Sys.setenv, stats::setNames(list(substring(item, at + 1)), key))
      }
    }
    saved
  }
  restore_env <- function(saved) {
    for (key in names(saved)) {
      if (is.na(saved[[key]])) Sys.unsetenv(key)
      else do.call(Sys.setenv, stats::setNames(list(saved[[key]]), key))
    }
  }

  run_cell <- function(code) {
    exprs <- tryCatch(parse(text = code, keep.source = FALSE), error = identity)
    if (inherits(exprs, "error")) {
      message("Error: ", conditionMessage(exprs))
      return(1L)
    }
    for (expr in exprs) {
      status <- tryCatch(
        withCallingHandlers({
          result <- withVisible(eval(expr, globalenv()))
          if (result$visible) print(result$value)
          0L
        }, warning = function(w) {
          message("Warning message:\n", conditionMessage(w))
          invokeRestart("muffleWarning")
        }),
        # `quit()` ends the cell, with status 0 too.
        sandlotExit = function(e) structure(as.integer(e$status), exit = TRUE),
        error = function(e) {
          call <- conditionCall(e)
          # A `stop()` at the top of the cell was called by the kernel's `eval`.
          if (identical(call, quote(eval(expr, globalenv())))) call <- NULL
          message("Error", if (!is.null(call)) paste0(" in ", deparse(call)[1]), ": ",
                  conditionMessage(e))
          1L
        },
        interrupt = function(i) {
          message("Interrupted")
          130L
        })
      if (status != 0L || isTRUE(attr(status, "exit"))) return(as.integer(status))
    }
    0L
  }

  report("ready")
  repeat {
    sizes <- read_header()
    code <- read_exact(sizes[1])
    stdin <- read_exact(sizes[2])
    env <- read_exact(sizes[3])
    cwd <- rawToChar(read_exact(sizes[4]))
    # An interrupt or an error outside the cell's own code (a NUL byte in it, a
    # working directory that is gone) ends the cell, never the kernel.
    status <- tryCatch({
      saved <- apply_env(env)
      setwd(cwd)
      status <- run_cell(rawToChar(code))
      restore_env(saved)
      flush(stdout())
      flush(stderr())
      status
    }, interrupt = function(i) 130L, error = function(e) {
      message("Error: ", conditionMessage(e))
      1L
    })
    # As a process's exit status would be.
    repeat {
      sent <- tryCatch({
        report(as.character(bitwAnd(status, 255L)))
        TRUE
      }, interrupt = function(i) FALSE)
      if (sent) break
    }
  }
})

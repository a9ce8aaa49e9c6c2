# sandlot's Ruby kernel: runs cells of code in one Ruby process, so local variables,
# methods, classes and required libraries persist from one run to the next.
#
# The agent sends each cell on the descriptor in SANDLOT_CELL_FD, framed as
# `sandlot-cell CODE STDIN ENV CWD` plus that many bytes of each; the kernel answers
# `ready` once, then each cell's exit status, on the descriptor in SANDLOT_DONE_FD.
# SIGINT interrupts the running cell (Interrupt), never the kernel.
require "stringio"

# A method, not the script's top level: cells share TOPLEVEL_BINDING, and the
# driver's own variables must not be theirs to overwrite.
def __sandlot_kernel
  cells = IO.new(Integer(ENV.delete("SANDLOT_CELL_FD")), "rb")
  done = IO.new(Integer(ENV.delete("SANDLOT_DONE_FD")), "wb")
  done.sync = true
  $stdout.sync = true
  $stderr.sync = true
  running = false
  trap("INT") { raise Interrupt if running }

  read_exact = lambda do |n|
    data = "".b
    while data.bytesize < n
      chunk = cells.read(n - data.bytesize)
      exit!(0) if chunk.nil?
      data << chunk
    end
    data
  end

  gem_specs = File.join(ENV.fetch("GEM_HOME", "/nonexistent"), "specifications")
  gems_seen = File.mtime(gem_specs) rescue nil
  kernel = Process.pid
  done.write("ready\n")
  count = 0
  loop do
    header = cells.gets
    exit!(0) if header.nil?
    fields = header.split
    unless fields.length == 5 && fields[0] == "sandlot-cell"
      $stderr.write("sandlot kernel: malformed cell header #{header.inspect}\n")
      exit!(2)
    end
    code, stdin, env, cwd = fields[1..].map { |n| read_exact.call(Integer(n)) }
    count += 1
    status = 0
    saved = {}
    begin
      env.split("\0").each do |item|
        key, value = item.split("=", 2)
        next if key.nil? || key.empty? || value.nil?
        # The first value is the one to restore, whatever the run repeats.
        saved[key] = ENV[key] unless saved.key?(key)
        ENV[key] = value
      end
      Dir.chdir(cwd)
      $stdin = StringIO.new(stdin)
      # Gems installed since the last cell land in GEM_HOME: look at it again.
      stamp = File.mtime(gem_specs) rescue nil
      if stamp != gems_seen
        gems_seen = stamp
        Gem::Specification.reset if defined?(Gem::Specification)
      end
      begin
        running = true
        # Cells share one binding: what one defines, the next sees.
        eval(code.force_encoding(Encoding::UTF_8), TOPLEVEL_BINDING, "<cell-#{count}>", 1)
      ensure
        running = false
      end
    rescue SystemExit => e
      status = e.status
    rescue Interrupt
      $stderr.write("Interrupted\n")
      status = 130
    rescue Exception => e
      # The kernel's frames are noise: the trace ends where the cell began.
      trace = (e.backtrace || []).take_while { |line| line.start_with?("<cell-") }
      $stderr.write("#{trace.first || "<cell-#{count}>"}: #{e.message} (#{e.class})\n")
      trace.drop(1).each { |line| $stderr.write("\tfrom #{line}\n") }
      status = 1
    ensure
      saved.each { |key, value| ENV[key] = value }
      $stdin = STDIN
      $stdout.flush
      $stderr.flush
    end
    # A process the cell forked that comes back here is a copy of the kernel: it
    # must never answer for a cell nor read the next one.
    exit!(status & 0xff) if Process.pid != kernel
    # As a process's exit status would be.
    done.write("#{status & 0xff}\n")
  end
end

__sandlot_kernel

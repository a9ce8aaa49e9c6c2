# The Perl example's kernel: runs cells of code in one perl process, so package
# variables, subs and loaded modules persist from one run to the next (a `my`
# variable belongs to its cell, as to a file).
#
# The agent sends each cell on the descriptor in SANDLOT_CELL_FD, framed as
# `sandlot-cell CODE STDIN ENV CWD` plus that many bytes of each; the kernel answers
# `ready` once, then each cell's exit status, on the descriptor in SANDLOT_DONE_FD.
# SIGINT interrupts the running cell, never the kernel.
use strict;
use warnings;
use POSIX ();

# Compiled before the driver's own variables exist, so a cell cannot see them: it
# reports what its eval left in $@, and stops the interrupt before returning.
sub cell {
    my ($code, $count) = @_;
    # Evaluated in package main without strict, as a script would start.
    eval "package main; no strict; no warnings;\n#line 1 \"<cell-$count>\"\n$code\n;1";
    my $error = $@;
    $main::__sandlot_running = 0;
    return $error;
}

open(my $cells, '<&=', $ENV{SANDLOT_CELL_FD}) or die "no cell descriptor: $!\n";
open(my $done, '>&=', $ENV{SANDLOT_DONE_FD}) or die "no done descriptor: $!\n";
binmode $cells;
$done->autoflush(1);
delete @ENV{qw(SANDLOT_CELL_FD SANDLOT_DONE_FD)};
STDOUT->autoflush(1);
STDERR->autoflush(1);

# A package variable, which `cell` can reach although it is compiled first.
our $__sandlot_running = 0;
$SIG{INT} = sub { die "Interrupted\n" if $__sandlot_running };
# A cell's `exit` ends the cell; the kernel itself leaves through CORE::exit.
BEGIN {
    *CORE::GLOBAL::exit = sub { die { sandlot_exit => (@_ ? $_[0] : 0) } };
}

sub exact {
    my ($n) = @_;
    my $data = '';
    while (length($data) < $n) {
        my $got = read($cells, $data, $n - length($data), length($data));
        CORE::exit(0) unless $got;
    }
    return $data;
}

# Bytes, not lines: a readline would name this handle in every later error message.
sub header {
    my $line = '';
    while ($line !~ /\n\z/) {
        read($cells, $line, 1, length($line)) or CORE::exit(0);
    }
    return $line;
}

my $kernel = $$;
print {$done} "ready\n";
my $count = 0;
while (1) {
    my $header = header();
    my @fields = split ' ', $header;
    unless (@fields == 5 && $fields[0] eq 'sandlot-cell') {
        print STDERR "sandlot kernel: malformed cell header $header";
        CORE::exit(2);
    }
    my ($code, $stdin, $env, $cwd) = map { exact($_) } @fields[1 .. 4];
    $count++;
    my %saved;
    for my $item (split /\0/, $env) {
        my ($key, $value) = split /=/, $item, 2;
        next unless defined $value && length $key;
        # The first value is the one to restore, whatever the run repeats.
        $saved{$key} = $ENV{$key} unless exists $saved{$key};
        $ENV{$key} = $value;
    }
    my $status = 0;
    if (!chdir $cwd) {
        print STDERR "cannot enter $cwd: $!\n";
        $status = 1;
    } else {
        open(local *STDIN, '<', \$stdin) or die;
        $__sandlot_running = 1;
        # An interrupt that lands as the cell's eval returns dies here, not the kernel.
        my $error = eval { cell($code, $count) } // $@;
        $__sandlot_running = 0;
        if (ref $error || length $error) {
            if (ref $error eq 'HASH' && exists $error->{sandlot_exit}) {
                $status = $error->{sandlot_exit};
            } elsif ($error eq "Interrupted\n") {
                print STDERR $error;
                $status = 130;
            } else {
                print STDERR $error;
                # As `perl main.pl` exits after an uncaught die.
                $status = 255;
            }
        }
    }
    for my $key (keys %saved) {
        if (defined $saved{$key}) { $ENV{$key} = $saved{$key} } else { delete $ENV{$key} }
    }
    # A process the cell forked that comes back here is a copy of the kernel: it
    # must never answer for a cell nor read the next one.
    POSIX::_exit($status & 255) if $$ != $kernel;
    # As a process's exit status would be.
    print {$done} ($status & 255), "\n";
}

#!/usr/bin/env node
import { Command } from 'commander';

const program = new Command('vcon-launch').description('Run one isolated vCon server per group').version('0.1.0');
program.parse();

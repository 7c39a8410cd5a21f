/** The results store: folders per run, the in-memory index, retention. */
export { FileResultRepository, type FileResultRepositoryOptions } from './repository.js';
export { parseResultId } from '../../core/ids.js';
